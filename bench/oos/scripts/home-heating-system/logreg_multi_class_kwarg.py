# idiom: StandardScaler + LogisticRegression(multi_class='multinomial') (the keyword is gone in scikit-learn 1.9); intended: crash (TypeError)
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

classes = ["ec", "er", "gc", "gr", "hp"]
train = pd.get_dummies(train, columns=["region"], dtype=int)
test = pd.get_dummies(test, columns=["region"], dtype=int)
feature_names = [c for c in train.columns if c not in ("id", "depvar")]

scaler = StandardScaler()
X = scaler.fit_transform(train[feature_names])
X_test = scaler.transform(test.reindex(columns=feature_names, fill_value=0))

clf = LogisticRegression(multi_class="multinomial", solver="lbfgs", C=0.3, max_iter=3000)
clf.fit(X, train["depvar"])
proba = clf.predict_proba(X_test)

sub = pd.DataFrame(proba, columns=clf.classes_)
sub.insert(0, "id", test["id"].values)
sub[["id"] + classes].to_csv("submission.csv", index=False)
