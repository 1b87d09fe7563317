# idiom: make_column_transformer + make_pipeline, multinomial LogisticRegression predicting the label strings directly; intended: valid
import pandas as pd
from sklearn.compose import make_column_transformer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, SplineTransformer

train_df = pd.read_csv("data/train.csv")
test_df = pd.read_csv("data/test.csv")

cats = ["religion", "degree", "country", "gender"]
preprocessor = make_column_transformer(
    (OneHotEncoder(handle_unknown="ignore"), cats),
    (SplineTransformer(n_knots=5, degree=3), ["age"]),
)
model = make_pipeline(preprocessor, LogisticRegression(C=0.5, max_iter=2000))
model.fit(train_df[cats + ["age"]], train_df["poverty"])
print("classes:", list(model.classes_))
print("train accuracy: %.3f" % model.score(train_df[cats + ["age"]], train_df["poverty"]))

test_df["poverty"] = model.predict(test_df[cats + ["age"]])
test_df.loc[:, ["id", "poverty"]].to_csv("submission.csv", index=False)
