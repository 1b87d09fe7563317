# idiom: AdaBoostClassifier(base_estimator=DecisionTreeClassifier(max_depth=2)) as written in pre-1.2 tutorials (the keyword was removed in scikit-learn 1.4), LabelEncoder on every string column; intended: crash (TypeError: unexpected keyword argument 'base_estimator')
import pandas as pd
from sklearn.ensemble import AdaBoostClassifier
from sklearn.metrics import balanced_accuracy_score
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import LabelEncoder
from sklearn.tree import DecisionTreeClassifier

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

for col in ["joblost", "nwhite", "school12", "sex", "bluecol", "smsa", "married", "dkids", "dykids", "head"]:
    le = LabelEncoder()
    le.fit(pd.concat([train[col], test[col]]))
    train[col] = le.transform(train[col])
    test[col] = le.transform(test[col])

X = train.drop(["id", "ui"], axis=1)
y = train["ui"]
X_train, X_valid, y_train, y_valid = train_test_split(X, y, test_size=0.2, random_state=42, stratify=y)

ada = AdaBoostClassifier(base_estimator=DecisionTreeClassifier(max_depth=2), n_estimators=200, learning_rate=0.5,
                         random_state=42)
ada.fit(X_train, y_train)
print("validation balanced accuracy:", balanced_accuracy_score(y_valid, ada.predict(X_valid)))

ada.fit(X, y)
pd.DataFrame({"id": test["id"], "ui": ada.predict(test.drop("id", axis=1))}).to_csv("submission.csv", index=False)
