# idiom: select_dtypes(include='object') + pd.get_dummies on the whole train frame, RandomForest; intended: crash (KeyError: get_dummies one-hot encoded the target column 'released' away)
import pandas as pd
from sklearn.ensemble import RandomForestClassifier

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

print(train.shape, test.shape)
print(train.head())

# one-hot encode every categorical column
cat_cols = train.select_dtypes(include="object").columns.tolist()
print("categorical:", cat_cols)
train = pd.get_dummies(train, columns=cat_cols, drop_first=True)
test = pd.get_dummies(test, columns=[c for c in cat_cols if c in test.columns], drop_first=True)

y = train["released"]
X = train.drop(columns=["id", "released"])

rf = RandomForestClassifier(n_estimators=200, class_weight="balanced", random_state=1)
rf.fit(X, y)
preds = rf.predict(test[X.columns])

pd.DataFrame({"id": test["id"], "released": preds}).to_csv("submission.csv", index=False)
